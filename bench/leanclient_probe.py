"""Run under the peers' venv: leanclient's async client, edit → diagnostics, printed as JSON.

Usage: python leanclient_probe.py PROJECT FILE STEPS (the two texts come on stdin as JSON)."""

import asyncio
import json
import sys
import time


async def main() -> None:
    from leanclient.aio import AsyncLeanLSPClient  # type: ignore[import-not-found]

    project, rel, steps = sys.argv[1], sys.argv[2], int(sys.argv[3])
    bad, good = json.loads(sys.stdin.read())
    client = AsyncLeanLSPClient(project)
    await client.start()
    try:
        await client.open(rel, text=bad)
        await client.diagnostics(rel)
        samples = []
        for i in range(steps):
            t = time.perf_counter()
            await client.update(rel, good if i % 2 == 0 else bad)
            await client.diagnostics(rel)
            samples.append((time.perf_counter() - t) * 1000)
        print(json.dumps(samples))
    finally:
        await client.close()


asyncio.run(main())
