#!/bin/bash
# alternate old/new: per-step cost over the plain loop
for i in 1 2 3 4; do
  for tree in /work/main /tmp/s4/old; do
    for model in mlp lenet; do
      cd $tree
      line=$(timeout 900 .venv/bin/python -m benchmarks.throughput --model $model --variants a,b0 --repeats 7 --no-save 2>&1 | grep -E "^\s+\((a|b0)\) .*us/step" | tr '\n' ' ')
      echo "run=$i tree=$(basename $tree) model=$model $line"
    done
  done
done
