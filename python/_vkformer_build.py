"""The build backend of the vkformer Python package (PEP 517), standard library only.

pip calls it for `pip install ./python`: it needs nothing installed (no setuptools,
no wheel), so build isolation fetches nothing and the install works offline. It
writes a wheel holding the package (vkformer/), vkformer_dask.py and, when one is
found, the build tree's libvkformer.so copied into vkformer/ (the wheel is then
tagged for this platform), which `import vkformer` loads before any other.

The library to copy, first match wins:
  1. `pip install --config-settings library=PATH ./python`;
  2. $VKFORMER_BUILD_DIR/libvkformer.so (tools/setup.sh's build folder);
  3. ../build/libvkformer.so beside this folder (tools/setup.sh's default).
A relative PATH or VKFORMER_BUILD_DIR is taken from the shell's folder ($PWD), not
from this one, where pip runs the backend. 1 and 2 must exist when given; without
any, the wheel is pure Python and the package looks for an installed library.

Also: build_sdist (the sources and PKG-INFO). Editable installs are not offered:
the package would find no library beside itself.
"""

import base64
import hashlib
import io
import os
import sys
import sysconfig
import tarfile
import tomllib
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = "vkformer"
MODULES = ["vkformer_dask.py"]          # top-level modules beside the package
LIBRARY_NAME = "libvkformer.so"         # the name the package loads from its folder
# Fixed timestamps: the same sources and library give the same wheel.
ZIP_TIME = (1980, 1, 1, 0, 0, 0)


class BuildError(Exception):
    pass


def _project():
    with open(os.path.join(HERE, "pyproject.toml"), "rb") as f:
        return tomllib.load(f)["project"]


def _dist_name(project):
    return project["name"].replace("-", "_")


def _metadata(project):
    lines = ["Metadata-Version: 2.1", "Name: " + project["name"], "Version: " + project["version"],
             "Summary: " + project.get("description", ""), "License: " + project.get("license", {}).get("text", "")]
    if "requires-python" in project:
        lines.append("Requires-Python: " + project["requires-python"])
    lines += ["Requires-Dist: " + d for d in project.get("dependencies", [])]
    for extra, deps in sorted(project.get("optional-dependencies", {}).items()):
        lines.append("Provides-Extra: " + extra)
        lines += ['Requires-Dist: %s ; extra == "%s"' % (d, extra) for d in deps]
    return ("\n".join(lines) + "\n").encode()


def _user_path(path):
    """A path as the user typed it: relative ones against the shell's folder."""
    path = os.path.expanduser(path)
    if not os.path.isabs(path):
        path = os.path.join(os.environ.get("PWD") or os.getcwd(), path)
    return os.path.normpath(path)


def _check_library(path, where):
    if not os.path.isfile(path):
        raise BuildError("vkformer: %s: %s is not a file (build the library first: ninja -C BUILD_DIR)" % (where, path))
    with open(path, "rb") as f:
        if f.read(4) != b"\x7fELF":
            raise BuildError("vkformer: %s: %s is not a shared library (no ELF header)" % (where, path))
    return os.path.realpath(path)


def _library_to_bundle(config_settings):
    """(path, why) of the library to copy into the wheel, or (None, why)."""
    named = (config_settings or {}).get("library")
    if named:
        return _check_library(_user_path(named), "--config-settings library"), "--config-settings library"
    build_dir = os.environ.get("VKFORMER_BUILD_DIR")
    if build_dir:
        return (_check_library(os.path.join(_user_path(build_dir), LIBRARY_NAME), "VKFORMER_BUILD_DIR"),
                "VKFORMER_BUILD_DIR")
    default = os.path.join(os.path.dirname(HERE), "build", LIBRARY_NAME)
    if os.path.isfile(default):
        return _check_library(default, "the default build folder"), "../build"
    return None, "no library at %s, VKFORMER_BUILD_DIR unset" % default


def _package_files():
    """(name in the wheel, path) of every source file, sorted."""
    files = []
    pkg = os.path.join(HERE, PACKAGE)
    for name in sorted(os.listdir(pkg)):
        # _install.py is meson install's record of its library folder: never a wheel's.
        if name.endswith(".py") and name != "_install.py":
            files.append((PACKAGE + "/" + name, os.path.join(pkg, name)))
    files += [(m, os.path.join(HERE, m)) for m in MODULES]
    return files


def _record_line(name, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (name, digest, len(data))


def _write_wheel(wheel_directory, project, library):
    dist = "%s-%s" % (_dist_name(project), project["version"])
    if library:
        tag = "py3-none-" + sysconfig.get_platform().replace("-", "_").replace(".", "_")
    else:
        tag = "py3-none-any"
    entries = [(name, open(path, "rb").read(), 0o644) for name, path in _package_files()]
    if library:
        entries.append((PACKAGE + "/" + LIBRARY_NAME, open(library, "rb").read(), 0o755))
    info = dist + ".dist-info"
    wheel_meta = ("Wheel-Version: 1.0\nGenerator: _vkformer_build\nRoot-Is-Purelib: %s\nTag: %s\n"
                  % ("false" if library else "true", tag)).encode()
    entries += [(info + "/METADATA", _metadata(project), 0o644), (info + "/WHEEL", wheel_meta, 0o644),
                (info + "/top_level.txt", ("%s\n%s\n" % (PACKAGE, "\n".join(m[:-3] for m in MODULES))).encode(),
                 0o644)]
    record = "".join(_record_line(n, d) + "\n" for n, d, _ in entries) + info + "/RECORD,,\n"
    entries.append((info + "/RECORD", record.encode(), 0o644))
    filename = "%s-%s.whl" % (dist, tag)
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as z:
        for name, data, mode in entries:
            zi = zipfile.ZipInfo(name, ZIP_TIME)
            zi.external_attr = (0o100000 | mode) << 16
            zi.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(zi, data)
    return filename


# ---------------------------------------------------------------- PEP 517 hooks

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    try:
        library, why = _library_to_bundle(config_settings)
    except BuildError as e:
        print(e, file=sys.stderr)
        raise SystemExit(1) from None
    if library:
        print("vkformer: the wheel holds %s (from %s)" % (library, why), file=sys.stderr)
    else:
        print("vkformer: the wheel holds no library (%s): import vkformer will look for an installed one"
              % why, file=sys.stderr)
    return _write_wheel(wheel_directory, _project(), library)


def build_sdist(sdist_directory, config_settings=None):
    project = _project()
    dist = "%s-%s" % (_dist_name(project), project["version"])
    filename = dist + ".tar.gz"
    sources = [("pyproject.toml", os.path.join(HERE, "pyproject.toml")),
               ("_vkformer_build.py", os.path.join(HERE, "_vkformer_build.py"))] + _package_files()
    pkg_info = _metadata(project)
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for name, path in sources:
            tar.add(path, arcname=dist + "/" + name, recursive=False)
        ti = tarfile.TarInfo(dist + "/PKG-INFO")
        ti.size, ti.mode = len(pkg_info), 0o644
        tar.addfile(ti, io.BytesIO(pkg_info))
    return filename
