#!/usr/bin/python3
"""Optuna's own plots of an `hfta tune --optuna` study, as PNG files (Debian's python3-optuna and
python3-matplotlib): parallel coordinates, optimization history, intermediate values and
parameter importances (the last with python3-sklearn).

  benchmarks/optuna_plots.py --storage sqlite:///study.db --study NAME --out docs/tune/optuna
"""
import argparse
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import optuna  # noqa: E402
from optuna.visualization import matplotlib as ovm  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--storage", required=True)
    ap.add_argument("--study", required=True)
    ap.add_argument("--out", required=True, help="folder; files are <out>_<plot>.png")
    args = ap.parse_args()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.load_study(study_name=args.study, storage=args.storage)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    plots = {
        "parallel_coordinates": ovm.plot_parallel_coordinate,
        "history": ovm.plot_optimization_history,
        "intermediate_values": ovm.plot_intermediate_values,
        "importances": ovm.plot_param_importances,
    }
    for name, plot in plots.items():
        try:
            ax = plot(study)
        except ImportError as e:  # importances need scikit-learn (python3-sklearn)
            print(f"{name}: skipped ({e})")
            continue
        fig = ax.figure if hasattr(ax, "figure") else ax[0].figure
        fig.set_size_inches(10, 5.5)
        fig.tight_layout()
        path = f"{args.out}_{name}.png"
        fig.savefig(path, dpi=90)
        plt.close(fig)
        print(path)


if __name__ == "__main__":
    main()
