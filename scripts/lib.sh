# Shared helpers for the scripts in this folder. Source it; do not run it.

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
