"""Harbor-format tasks: loading, splits, the bundled-suite generator and `coevo tasks check`."""

from coevo.tasks.task import Task, TaskConfig, TaskSet, find_task_folders, load_task, load_taskset

__all__ = ["Task", "TaskConfig", "TaskSet", "find_task_folders", "load_task", "load_taskset"]
