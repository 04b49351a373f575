package rpcbench

import (
	"math"
	"slices"
)

// latencyFigures are microseconds with three decimals, exact over every sample.
type latencyFigures struct {
	Mean, P50, P90, P99, P999, Min, Max float64
}

// summarize sorts the nanosecond samples and returns their figures; a percentile p is the
// nearest-rank sample (the smallest one that at least p% of the samples do not exceed). ok is
// false when there is no sample.
func summarize(nanoseconds []int64) (f latencyFigures, ok bool) {
	if len(nanoseconds) == 0 {
		return f, false
	}
	slices.Sort(nanoseconds)
	var sum float64
	for _, v := range nanoseconds {
		sum += float64(v)
	}
	percentile := func(p float64) float64 {
		rank := int(math.Ceil(p / 100 * float64(len(nanoseconds))))
		rank = min(max(rank, 1), len(nanoseconds))
		return micros(float64(nanoseconds[rank-1]))
	}
	return latencyFigures{
		Mean: micros(sum / float64(len(nanoseconds))),
		P50:  percentile(50),
		P90:  percentile(90),
		P99:  percentile(99),
		P999: percentile(99.9),
		Min:  micros(float64(nanoseconds[0])),
		Max:  micros(float64(nanoseconds[len(nanoseconds)-1])),
	}, true
}

func micros(nanoseconds float64) float64 { return round(nanoseconds/1e3, 3) }

func round(v float64, decimals int) float64 {
	scale := math.Pow(10, float64(decimals))
	return math.Round(v*scale) / scale
}
