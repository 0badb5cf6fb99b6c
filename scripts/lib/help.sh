# Sourced by the scripts: `--help`/`-h` prints the script's leading comment block and
# exits 0 before anything is installed or run.
# Usage: source scripts/lib/help.sh; print_help_if_asked "$0" "$@"
print_help_if_asked() {
    local script=$1
    shift
    local arg
    for arg in "$@"; do
        case "$arg" in
            -h | --help)
                # The comment block after the shebang, without the leading '# '.
                sed -n '2,/^[^#]/{/^#/!q;s/^# \{0,1\}//;p}' "$script"
                exit 0
                ;;
        esac
    done
}
