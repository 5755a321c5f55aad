"""agent_tools: owns sessions: tasks, edit scoping, tools, verifier, ledger, servers, the CLI."""
