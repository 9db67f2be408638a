"""The agent loop and the lockstep rollout engine, with token-in/token-out trajectories.

    trajectory.py  Trajectory (token buffer, mask, logprobs, messages, status, reward) and JSONL files
    tokens.py      TITO: sampled ids kept as sampled, observations tokenized as suffixes, drift
    episode.py     one episode: prompt -> reply -> tool calls -> observation, ended by `EpisodeEnd`
    engine.py      `rollout(tasks, harness, policy, n_per_task)`: batched turns, parallel tools and verifiers
    cli.py         `coevo show FILE`: an episode turn by turn
"""

from importlib import import_module

# Loaded on first use, so that `coevo --help` (which mounts rollout/cli.py) does not import the engine.
_HOMES = {"rollout": "engine", "Episode": "episode", "EpisodeEnd": "episode", "Step": "trajectory",
          "Trajectory": "trajectory", "load_trajectories": "trajectory", "save_trajectories": "trajectory"}
__all__ = [
    "Episode",
    "EpisodeEnd",
    "Step",
    "Trajectory",
    "load_trajectories",
    "rollout",
    "save_trajectories",
]


def __getattr__(name: str):
    if name not in _HOMES:
        raise AttributeError(f"module 'coevo.rollout' has no attribute {name!r}")
    return getattr(import_module(f"coevo.rollout.{_HOMES[name]}"), name)
