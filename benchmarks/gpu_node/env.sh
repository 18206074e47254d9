# Sourced by the GPU-node scripts (from the repository root): wheels the node lacks, put in .whl/
# (e.g. defusedxml), go to /tmp/site; gdrcheck runs from this checkout.
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl || exit 1
  export PYTHONPATH=/tmp/site:$PWD
else
  export PYTHONPATH=$PWD
fi
