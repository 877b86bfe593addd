# Shared helpers for the scripts in this folder. Source it; do not run it.

# The toolchain is the one go.work's toolchain line names (a patch release
# with the standard library's security fixes). A Go installation whose
# go.env says GOTOOLCHAIN=local would keep its own; auto lets the go command
# fetch the named one through the module proxy, once. An explicit
# GOTOOLCHAIN in the environment still wins.
export GOTOOLCHAIN="${GOTOOLCHAIN:-auto}"

# repo_root prints the repository's root folder.
repo_root() { cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd; }

# module_patterns prints one `./<module>/...` pattern per module of go.work,
# so every module is covered and a new one joins by being added to go.work.
module_patterns() {
	local root dir
	root=$(repo_root)
	while IFS= read -r dir; do
		[[ -n "$dir" ]] || continue
		echo "./${dir#"$root"/}/..."
	done < <(cd "$root" && go list -m -f '{{.Dir}}')
}

# as_root runs a command as root (directly, or through sudo when there is one).
as_root() {
	if [[ $(id -u) -eq 0 ]]; then
		"$@"
	elif command -v sudo >/dev/null 2>&1; then
		sudo "$@"
	else
		echo "need root to run: $*" >&2
		return 1
	fi
}
