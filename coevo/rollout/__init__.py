"""The agent loop and the lockstep rollout engine, with token-in/token-out trajectories.

    trajectory.py  Trajectory (token buffer, mask, logprobs, messages, status, reward) and JSONL files
    tokens.py      TITO: sampled ids kept as sampled, observations tokenized as suffixes, drift
    episode.py     one episode: prompt -> reply -> tool calls -> observation, ended by `EpisodeEnd`
    engine.py      `rollout(tasks, harness, policy, n_per_task)`: batched turns, parallel tools and verifiers
    cli.py         `coevo show FILE`: an episode turn by turn
"""

from coevo.rollout.engine import rollout
from coevo.rollout.episode import Episode, EpisodeEnd
from coevo.rollout.trajectory import Status, Step, Trajectory, load_trajectories, save_trajectories

__all__ = ["Episode", "EpisodeEnd", "Status", "Step", "Trajectory", "load_trajectories", "rollout",
           "save_trajectories"]
