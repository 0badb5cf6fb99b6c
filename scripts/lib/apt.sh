# Sourced by the set-up scripts: apt-get that is safe to interrupt and to run again.
# A run killed during `dpkg` leaves it half-configured ("dpkg was interrupted, you must
# manually run 'dpkg --configure -a'"): finish that first, then install; wait for a lock
# another apt holds instead of failing at once.
# Usage: source scripts/lib/apt.sh; apt_install PACKAGE...
apt_install() {
    local sudo=
    [ "$(id -u)" -ne 0 ] && sudo=sudo
    local lock=(-o DPkg::Lock::Timeout=300)
    if [ -n "$($sudo dpkg --audit 2>/dev/null)" ]; then
        echo "[setup] an earlier dpkg run was interrupted: finishing it (dpkg --configure -a)"
        DEBIAN_FRONTEND=noninteractive $sudo dpkg --configure -a
    fi
    $sudo apt-get "${lock[@]}" update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get "${lock[@]}" install -y -qq "$@" >/dev/null
}
