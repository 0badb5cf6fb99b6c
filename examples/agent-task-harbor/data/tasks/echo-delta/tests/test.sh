#!/bin/bash
# Reward 1 when the agent wrote the expected word.
if [ "$(cat /app/answer.txt 2>/dev/null)" = delta ]; then echo 1 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
