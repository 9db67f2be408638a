"""`coevo search` end to end on the docker backend: the config's `sandbox: docker` reaches the episodes of
every phase (trials, promotion, arms, the final table), against a real engine (.ci/setup starts one)."""

from __future__ import annotations

import threading

import docker
from search_helpers import write_config

from coevo.sandbox.docker_io import LABEL, OWNER_LABEL, owner_labels
from coevo.sandbox.images import BASE_TAG


def test_a_small_search_runs_its_episodes_in_docker_containers(suite, tmp_path, monkeypatch):
    from coevo.search.config import load_config
    from coevo.search.run import Search

    monkeypatch.setenv("COEVO_IMAGE_MAP", f"debian:bookworm-slim={BASE_TAG}")  # nothing can be pulled here
    config = load_config(write_config(tmp_path, suite, name="on-docker", sandbox="docker",
                                      plan={"trials": 2, "dev_tasks": 4, "batches": 1},
                                      splits={"promotion": 4, "test": 4}))
    client, ours = docker.from_env(), owner_labels()[OWNER_LABEL]
    seen: set[str] = set()
    done = threading.Event()

    def watch() -> None:  # the engine's own view: which tasks had a container of this process
        while not done.wait(0.05):
            seen.update(c.labels["coevo.task"] for c in client.containers.list(filters={"label": LABEL},
                                                                               ignore_removed=True)
                        if c.labels.get(OWNER_LABEL) == ours)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        state = Search(config, log=lambda line: None).run()
    finally:
        done.set()
        watcher.join()
    assert state.done and state.test["baseline"]["episodes"] == 4
    assert all(r["held_out"]["episodes"] == 9 for r in state.test.values())
    roles = {"evolve": set(state.baseline.per_task), "test": set(state.test["baseline"]["per_task"]),
             "held-out": set(state.test["baseline"]["held_out"]["per_task"])}
    assert all(seen & names for names in roles.values()), (seen, roles)  # every role ran in containers
    assert not [c for c in client.containers.list(all=True, filters={"label": LABEL})
                if c.labels.get(OWNER_LABEL) == ours]  # and every container was closed
