"""The agent task's verifier side: quiesce, audit, final scoring and the sealed reward."""
