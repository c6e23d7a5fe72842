#!/usr/bin/env bash
# vs-llamacpp.sh: toy bench model against llama-bench on the same GGUF files, alternating per
# file, ROUNDS rounds, each run bracketed by `toy bench dram`, so that a ratio taken while the
# host's memory changed speed can be told from one taken at a steady speed.
#
#   scripts/vs-llamacpp.sh [-t THREADS] [-p 128] [-n 32] [-r ROUNDS] LLAMA_BIN_DIR FILE.gguf...
#
# TOY (default bin/toy) is the toy binary. One line a file and round, tab-separated:
#   round file dram0 toy_pp toy_tg dram1 llama_pp llama_tg dram2 pp_ratio tg_ratio steady
# (dram in GB/s before toy, between the two, after llama-bench; steady is "yes" where the three
# are within 15 % of their largest), then the ratios' ranges per file over all rounds and over
# the steady ones. The order of the two programs is reversed every other round (ABBA).
set -euo pipefail
threads=2 pp=128 tg=32 rounds=2
while getopts "t:p:n:r:" o; do
	case $o in
	t) threads=$OPTARG ;;
	p) pp=$OPTARG ;;
	n) tg=$OPTARG ;;
	r) rounds=$OPTARG ;;
	*) echo "usage: $0 [-t THREADS] [-p PP] [-n TG] [-r ROUNDS] LLAMA_BIN_DIR FILE.gguf..." >&2; exit 2 ;;
	esac
done
shift $((OPTIND - 1))
if [ $# -lt 2 ]; then
	echo "usage: $0 [-t THREADS] [-p PP] [-n TG] [-r ROUNDS] LLAMA_BIN_DIR FILE.gguf..." >&2
	exit 2
fi
llama=$1/llama-bench
shift
toy=${TOY:-bin/toy}
for f in "$toy" "$llama"; do
	[ -x "$f" ] || { echo "$0: $f is not an executable" >&2; exit 2; }
done

dram() { "$toy" bench dram -t "$threads" | awk '{print $4}'; }
# toy_run and llama_run print "pp tg" (tokens/s, the means).
toy_run() {
	"$toy" bench model -m "$1" -p "$pp" -n "$tg" -r 2 -t "$threads" -no-dram 2>/dev/null |
		awk 'NR == 1 {for (i = 1; i < NF; i++) { if ($i ~ /^pp[0-9]+$/) p = $(i+1); if ($i ~ /^tg[0-9]+$/) g = $(i+1) }} END {print p, g}'
}
llama_run() {
	"$llama" -m "$1" -p "$pp" -n "$tg" -t "$threads" -r 2 2>/dev/null |
		awk -F'|' '/ pp[0-9]/ {split($(NF-1), a, "±"); p = a[1]+0} / tg[0-9]/ {split($(NF-1), a, "±"); g = a[1]+0} END {print p, g}'
}

out=$(mktemp)
trap 'rm -f "$out"' EXIT
for r in $(seq 1 "$rounds"); do
	for f in "$@"; do
		d0=$(dram)
		if [ $((r % 2)) -eq 1 ]; then
			read -r tp tt < <(toy_run "$f"); d1=$(dram); read -r lp lt < <(llama_run "$f")
		else
			read -r lp lt < <(llama_run "$f"); d1=$(dram); read -r tp tt < <(toy_run "$f")
		fi
		d2=$(dram)
		echo "$r $(basename "$f") $d0 $tp $tt $d1 $lp $lt $d2" |
			awk '{hi = $3; lo = $3; for (i = 6; i <= 9; i += 3) { if ($i > hi) hi = $i; if ($i < lo) lo = $i }
				printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%.2f\t%s\n", $1, $2, $3, $4, $5, $6, $7, $8, $9,
					$4 / $7, $5 / $8, (hi - lo) <= 0.15 * hi ? "yes" : "no"}' | tee -a "$out"
	done
done
echo
echo "file	pp ratio	tg ratio	tg ratio, steady rounds	dram of the steady rounds"
awk -F'\t' '{f = $2; n[f]++; if (!(f in pl) || $10 < pl[f]) pl[f] = $10; if (!(f in ph) || $10 > ph[f]) ph[f] = $10
		if (!(f in tl) || $11 < tl[f]) tl[f] = $11; if (!(f in th) || $11 > th[f]) th[f] = $11
		if ($12 == "yes") { s[f]++; d = ($3 + $6 + $9) / 3
			if (!(f in sl) || $11 < sl[f]) sl[f] = $11; if (!(f in sh) || $11 > sh[f]) sh[f] = $11
			if (!(f in dl) || d < dl[f]) dl[f] = d; if (!(f in dh) || d > dh[f]) dh[f] = d }
		if (!(f in order)) { order[f] = ++files; name[files] = f } }
	END { for (i = 1; i <= files; i++) { f = name[i]
		steady = s[f] ? sprintf("%.2f–%.2f (%d of %d)", sl[f], sh[f], s[f], n[f]) : sprintf("none of %d", n[f])
		drams = s[f] ? sprintf("%.0f–%.0f GB/s", dl[f], dh[f]) : "-"
		printf "%s\t%.2f–%.2f\t%.2f–%.2f\t%s\t%s\n", f, pl[f], ph[f], tl[f], th[f], steady, drams } }' "$out"
