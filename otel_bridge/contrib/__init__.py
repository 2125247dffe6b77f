"""Optional integrations (FastAPI, aiohttp, Ray, NCCL); each imports its framework only when used."""
