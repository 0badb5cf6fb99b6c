"""Harbor agent plugins and agent configuration: the re-prompting wrapper
(`posttrainbench.host.agents.reprompt:RepromptingAgent`) and OpenCode's GLM provider block."""
