#!/usr/bin/env bash
# `cmake --install` of this build, then examples/ built from an unrelated folder against the
# installed package alone (find_package(hfta)), then run: the custom CNN trains as a fused array
# on Fashion-MNIST and exports its best model, and the exported model, loaded back into a
# one-model array, has the same test accuracy.
#   install_and_examples.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
source=$(cd "$2" && pwd)
work=$(mktemp -d /tmp/hfta_install_test.XXXXXX)
trap 'rm -rf "$work"' EXIT

cmake --install "$build" --prefix "$work/prefix" > "$work/install.log"
mkdir "$work/project"
cp "$source"/examples/*.h "$source"/examples/*.cpp "$source"/examples/CMakeLists.txt \
  "$work/project/"
cmake -S "$work/project" -B "$work/project/build" -DCMAKE_PREFIX_PATH="$work/prefix" \
  > "$work/configure.log"
# The package came from the installed prefix, not the build tree.
package_dir=$(sed -n 's/^hfta_DIR:PATH=//p' "$work/project/build/CMakeCache.txt")
if [[ "$package_dir" != "$work/prefix/"* ]]; then
  echo "find_package(hfta) found $package_dir, not the installed package under $work/prefix"
  exit 1
fi
if grep -rq -- "$source" "$work/prefix/lib/cmake/hfta"; then
  echo "the installed package refers to the source tree $source:"
  grep -r -- "$source" "$work/prefix/lib/cmake/hfta" | head -5
  exit 1
fi
cmake --build "$work/project/build" -j2 > "$work/build.log" || { cat "$work/build.log"; exit 1; }

"$work/project/build/train_custom_cnn" 60 "$work/best.safetensors" 0.0005 0.003 | tee "$work/train.txt"
trained=$(sed -n 's/^best model [0-9]*: test accuracy \([0-9.]*\), exported to .*/\1/p' "$work/train.txt")
"$work/project/build/load_exported" "$work/best.safetensors" | tee "$work/load.txt"
loaded=$(sed -n 's/.*: test accuracy \([0-9.]*\)$/\1/p' "$work/load.txt")
if [[ -z "$trained" || "$trained" != "$loaded" ]]; then
  echo "the exported model's test accuracy '$loaded' differs from the trained model's '$trained'"
  exit 1
fi
# A state_dict of another architecture is refused in one line naming the file.
if "$work/project/build/load_exported" "$work/prefix/include/hfta/core/error.h" 2> "$work/err.txt"; then
  echo "load_exported accepted a file that is not safetensors"
  exit 1
fi
grep -q "error.h" "$work/err.txt"
echo "installed package, examples built and run: test accuracy $trained trained and loaded"
