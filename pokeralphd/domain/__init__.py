"""The pure domain model: entities, statuses, transitions, ids. No I/O, no asyncio."""
