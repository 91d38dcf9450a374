"""Memory: the store of what the agent was taught, recall, the markdown memory documents, the
memory tools and after-turn learning."""
