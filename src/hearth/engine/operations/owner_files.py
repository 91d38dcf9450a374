"""The owner's own files the dashboard and the API read and edit: an agent's workspace files
(`engine.turn.agents`) and the saved prompts a message can mention (`engine.intake.mentions`).
`OwnerFiles` is made once by the engine (`engine.files`); every method is awaited, the file
work done off the event loop."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hearth.engine.intake import mentions
from hearth.engine.turn import agents


class OwnerFiles:
    """Read and write an agent's files; list the saved prompts."""

    def __init__(self, agents_folder: Path, prompts_dir: Path) -> None:
        self._agents = agents_folder
        self._prompts = prompts_dir

    async def agent_files(self, agent: str) -> list[agents.AgentFile]:
        """The agent's workspace files, each read whole (or why it could not be)."""
        return await asyncio.to_thread(agents.read_files, self._agents, agent)

    async def write_agent_file(self, agent: str, name: str, text: str) -> bool:
        """Keep one of the agent's files whole (`agents.write_file`)."""
        return await asyncio.to_thread(agents.write_file, self._agents, agent, name, text)

    async def saved_prompts(self) -> list[mentions.SavedPrompt]:
        """Every saved prompt, with its description and placeholders."""
        return await asyncio.to_thread(mentions.listing, self._prompts)
