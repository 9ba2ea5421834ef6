"""FastEstimator 1.7's ``fe.summary.logs``: read the Logger's console output back into Summary histories and plot
experiments side by side (with matplotlib, loaded only when a figure is drawn).

* :func:`parse_log_file` reads one log file into a :class:`fe_ray.summary.Summary`.
* :func:`parse_log_files` / :func:`parse_log_dir` read several (optionally averaging groups of runs) and plot them.
* :func:`plot_logs` draws Summary objects into a matplotlib Figure; :func:`visualize_logs` also saves or shows it.
"""

from fe_ray.summary.logs.log_parse import parse_log_dir, parse_log_file, parse_log_files
from fe_ray.summary.logs.log_plot import plot_logs, visualize_logs

__all__ = ["parse_log_dir", "parse_log_file", "parse_log_files", "plot_logs", "visualize_logs"]
