#!/usr/bin/env bash
# bench/cpu_name.sh — the CPU's name, for the benchmarks' captions, on x86 and on ARM.
#   bench/cpu_name.sh           "Intel(R) Xeon(R) Platinum 8488C", "Cortex-A72 (Raspberry Pi 4 Model B Rev 1.4)"
#   bench/cpu_name.sh --words   the same with spaces as _ (for RESULT lines)
# x86 kernels print a `model name` line in /proc/cpuinfo; ARM kernels do not. There lscpu names the core
# from its `CPU part` number (util-linux's table), else this script does for the common parts, and the
# board or machine comes from the device tree where there is one (Raspberry Pi, most ARM boards).
set -u

from_cpuinfo() { sed -n "s/^$1[[:space:]]*:[[:space:]]*//p" /proc/cpuinfo 2>/dev/null | head -n 1; }

# ARM's implementer and part numbers (/proc/cpuinfo "CPU implementer", "CPU part") for the common cores.
arm_core_name() {
  case "$1:$2" in
    0x41:0xd03) echo "Cortex-A53" ;;      0x41:0xd04) echo "Cortex-A35" ;;
    0x41:0xd05) echo "Cortex-A55" ;;      0x41:0xd07) echo "Cortex-A57" ;;
    0x41:0xd08) echo "Cortex-A72" ;;      0x41:0xd09) echo "Cortex-A73" ;;
    0x41:0xd0a) echo "Cortex-A75" ;;      0x41:0xd0b) echo "Cortex-A76" ;;
    0x41:0xd0c) echo "Neoverse-N1" ;;     0x41:0xd0d) echo "Cortex-A77" ;;
    0x41:0xd40) echo "Neoverse-V1" ;;     0x41:0xd41) echo "Cortex-A78" ;;
    0x41:0xd44) echo "Cortex-X1" ;;       0x41:0xd46) echo "Cortex-A510" ;;
    0x41:0xd47) echo "Cortex-A710" ;;     0x41:0xd48) echo "Cortex-X2" ;;
    0x41:0xd49) echo "Neoverse-N2" ;;     0x41:0xd4b) echo "Cortex-A78C" ;;
    0x41:0xd4f) echo "Neoverse-V2" ;;     0x41:0xd80) echo "Cortex-A520" ;;
    0x41:0xd81) echo "Cortex-A720" ;;     0x41:0xd82) echo "Cortex-X4" ;;
    0x41:0xd8e) echo "Neoverse-N3" ;;     0x41:0xd84) echo "Neoverse-V3" ;;
    0x61:*) echo "Apple silicon (part $2)" ;;
    0x51:*) echo "Qualcomm (part $2)" ;;
    0x46:*) echo "Fujitsu (part $2)" ;;
    0xc0:*) echo "Ampere (part $2)" ;;
    *) [ -n "$2" ] && echo "ARM implementer $1 part $2" ;;
  esac
}

name=$(from_cpuinfo "model name")
if [ -z "$name" ]; then
  name=$(lscpu 2>/dev/null | sed -n 's/^[[:space:]]*Model name:[[:space:]]*//p' | head -n 1)
  case "$name" in "" | "-") name=$(arm_core_name "$(from_cpuinfo "CPU implementer")" "$(from_cpuinfo "CPU part")") ;; esac
  board=$(tr -d '\0' </sys/firmware/devicetree/base/model 2>/dev/null)
  if [ -n "$board" ]; then name="${name:+$name }($board)"; fi
fi
name=${name:-unknown}
if [ "${1:-}" = --words ]; then
  sed 's/[[:space:]]*$//; s/[[:space:]]\+/_/g' <<<"$name"
else
  echo "$name"
fi
