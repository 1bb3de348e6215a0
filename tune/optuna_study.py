#!/usr/bin/python3
"""Writes an `hfta tune` search into an Optuna study, so Optuna's plots and dashboard show it.

  optuna_study.py --run runs/tune/fused --storage sqlite:///study.db [--study NAME]

Reads the run's tune.json (the search space and metric) and history.csv (a row per trial and
rung), and writes one Optuna trial per hfta trial: its parameters with the space's
distributions, its metric at each budget (epochs) as intermediate values, its last metric as
the value, and its state: COMPLETE when it reached the largest budget of the search, PRUNED
when the scheduler stopped it earlier, FAIL when it failed. The study (by default named after
the run: <out folder>-<mode>) is replaced on every call, so it always mirrors history.csv.
`hfta tune --optuna URL` runs this file at the end of a search (Debian: python3-optuna).
"""
import argparse
import csv
import json
import math
import os
import sys

try:
    import optuna
except ImportError:
    sys.exit("hfta tune --optuna needs Optuna for Debian's python3: apt-get install python3-optuna")


def distributions(space):
    """Optuna's distribution for each parameter of an hfta search space (tune/tune_space.h)."""
    out = {}
    for name, p in space.items():
        dist = p["dist"]
        if dist == "uniform":
            out[name] = optuna.distributions.FloatDistribution(p["low"], p["high"])
        elif dist == "loguniform":
            out[name] = optuna.distributions.FloatDistribution(p["low"], p["high"], log=True)
        elif dist == "int":
            out[name] = optuna.distributions.IntDistribution(int(p["low"]), int(p["high"]))
        elif dist == "choice":
            out[name] = optuna.distributions.CategoricalDistribution(p["values"])
        else:
            sys.exit(f"search space parameter {name}: unknown distribution {dist}")
    return out


def value_of(text, dist):
    """A history.csv cell as the distribution's value (a choice is matched to its entry)."""
    if isinstance(dist, optuna.distributions.CategoricalDistribution):
        for choice in dist.choices:
            if isinstance(choice, str):
                if choice == text:
                    return choice
            elif not isinstance(text, str) or text.strip() == "":
                continue
            else:
                try:
                    if math.isclose(float(text), float(choice), rel_tol=1e-6, abs_tol=0.0):
                        return choice
                except ValueError:
                    pass
        raise ValueError(f"{text} is none of the choices {dist.choices}")
    if isinstance(dist, optuna.distributions.IntDistribution):
        return int(float(text))
    # Trials train with float32 hyperparameters: keep the drawn value inside the bounds.
    return min(max(float(text), dist.low), dist.high)


def read_trials(history_path):
    """The rows of each trial, in order, keyed by trial number."""
    trials = {}
    with open(history_path, newline="") as f:
        for row in csv.DictReader(f):
            trials.setdefault(int(row["trial"]), []).append(row)
    return trials


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", required=True, help="the search's folder (<out>/<mode>)")
    ap.add_argument("--storage", required=True, help="an Optuna storage URL, e.g. sqlite:///s.db")
    ap.add_argument("--study", help="the study's name (default: <out folder>-<mode>)")
    args = ap.parse_args()
    with open(os.path.join(args.run, "tune.json")) as f:
        identity = json.load(f)
    space = distributions(json.loads(identity["space"]))
    metric = identity["metric"]
    run = os.path.abspath(args.run)
    name = args.study or f"{os.path.basename(os.path.dirname(run))}-{os.path.basename(run)}"
    trials = read_trials(os.path.join(args.run, "history.csv"))
    largest = max((float(r["budget"]) for rows in trials.values() for r in rows
                   if r["status"] == "ok"), default=0.0)

    try:
        optuna.delete_study(study_name=name, storage=args.storage)
    except KeyError:
        pass  # no such study yet
    study = optuna.create_study(study_name=name, storage=args.storage,
                                direction="maximize" if metric == "val_acc" else "minimize")
    study.set_user_attr("hfta_run", run)
    study.set_user_attr("hfta_model", identity.get("model", ""))
    study.set_user_attr("hfta_algorithm", identity.get("algorithm", ""))
    study.set_user_attr("hfta_metric", metric)
    complete = pruned = failed = 0
    for number in sorted(trials):
        rows = trials[number]
        params = {p: value_of(rows[0][p], d) for p, d in space.items()}
        ok = [r for r in rows if r["status"] == "ok" and r["metric"] not in ("", "nan")]
        intermediate = {int(float(r["budget"])): float(r["metric"]) for r in ok}
        if not ok:
            state, value = optuna.trial.TrialState.FAIL, None
            failed += 1
        elif float(ok[-1]["budget"]) >= largest:
            state, value = optuna.trial.TrialState.COMPLETE, float(ok[-1]["metric"])
            complete += 1
        else:
            # A pruned trial keeps its last reported value as its intermediate values say.
            state, value = optuna.trial.TrialState.PRUNED, None
            pruned += 1
        trial = optuna.trial.create_trial(params=params, distributions=space, value=value,
                                          intermediate_values=intermediate, state=state,
                                          user_attrs={"hfta_trial": number})
        study.add_trial(trial)
    print(f"optuna study {name} in {args.storage}: {len(trials)} trials ({complete} complete, "
          f"{pruned} pruned, {failed} failed), {metric} "
          f"{'maximized' if metric == 'val_acc' else 'minimized'}")


if __name__ == "__main__":
    main()
