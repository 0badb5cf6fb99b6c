"""The host side of agent tasks: the compiler that writes an agent task's directory."""
