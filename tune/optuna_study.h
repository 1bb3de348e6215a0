// `hfta tune --optuna URL`: the search as an Optuna study, written by tune/optuna_study.py
// through Debian's python3-optuna (Optuna's storage has its own schema and migrations; its API is
// the stable way in). Each hfta trial becomes an Optuna trial with its parameters and the space's
// distributions, its metric at each budget as intermediate values, and its state (complete,
// pruned by the scheduler, failed), so Optuna's plots and dashboard show the search.
#pragma once

#include <string>

namespace hfta {

// The python3 that runs the script: $HFTA_PYTHON, else Debian's /usr/bin/python3 where it
// exists (python3-optuna installs there), else python3 from PATH.
std::string optuna_python();

// Throws hfta::Error saying what to install unless that python3 imports optuna (checked before
// a search starts, so that a long search does not end in this error).
void check_optuna_available();

// Writes the script into `run_dir` (optuna_study.py, to run again by hand) and runs it on the
// run's tune.json and history.csv: study `study` in `storage` replaced by the search. Throws
// hfta::Error with the script's last line when it fails. Prints its summary unless quiet.
void write_optuna_study(const std::string& run_dir, const std::string& storage,
                        const std::string& study, bool quiet);

}  // namespace hfta
