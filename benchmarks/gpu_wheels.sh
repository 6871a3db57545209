# Sourced by gpu_check.sh and reproduce/gpu_slice.sh with $PY set: installs, into
# /tmp/site, each wheel in .whl/ whose module $PY cannot import (a GPU image that has jax
# but not jraph, rdkit, pooch, ...), never one it already has, and puts /tmp/site on
# PYTHONPATH.
if [ -d .whl ]; then
    missing=()
    for wheel in .whl/*.whl; do
        module=$(basename "$wheel" | cut -d- -f1 | tr '[:upper:]' '[:lower:]')
        case $module in
            fonttools) module=fontTools ;;
            pillow) module=PIL ;;
            python_dateutil) module=dateutil ;;
        esac
        "$PY" -c "import $module" 2>/dev/null || missing+=("$wheel")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "installing into /tmp/site: ${missing[*]}"
        "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
            --target /tmp/site "${missing[@]}"
    fi
fi
if [ -d /tmp/site ]; then  # an if: a false test would end a sourcing `set -e` script
    export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
