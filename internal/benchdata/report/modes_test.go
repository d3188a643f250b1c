package main

import (
	"math"
	"slices"
	"testing"
)

func TestSplitModesGroupsRunsByTheirReference(t *testing.T) {
	nan := math.NaN()
	for _, tc := range []struct {
		name             string
		figure, ref, mem []float64
		wantNames        []string
		wantFigures      [][]float64
	}{
		{"no reference measured", []float64{3000, 3100}, nil, nil, nil, nil},
		{"references within a few per cent are one mode", []float64{2200, 2300, 2250}, []float64{180, 185, 182}, []float64{300, 310, 305},
			[]string{"one mode"}, [][]float64{{2200, 2300, 2250}}},
		{"a jump of 1.5x splits fast from slow, in run order", []float64{2200, 3600, 2300, 3700}, []float64{180, 290, 182, 300}, []float64{300, 300, 310, 305},
			[]string{"fast", "slow"}, [][]float64{{2200, 2300}, {3600, 3700}}},
		{"the widest gap decides when there are two", []float64{1, 2, 3}, []float64{100, 125, 200}, []float64{nan, nan, nan},
			[]string{"fast", "slow"}, [][]float64{{1, 2}, {3}}},
		{"a run without its reference is left out", []float64{1, 2}, []float64{100, 0}, nil,
			[]string{"one mode"}, [][]float64{{1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := splitModes(tc.figure, tc.ref, tc.mem, nil)
			if len(ms) != len(tc.wantNames) {
				t.Fatalf("got %d modes %+v, want %v", len(ms), ms, tc.wantNames)
			}
			for i, m := range ms {
				if m.name != tc.wantNames[i] || !slices.Equal(m.figure, tc.wantFigures[i]) {
					t.Errorf("mode %d: %s %v, want %s %v", i, m.name, m.figure, tc.wantNames[i], tc.wantFigures[i])
				}
				for j := range m.figure {
					if m.ratio[j] != m.figure[j]/m.ref[j] {
						t.Errorf("mode %d run %d: ratio %v, want %v", i, j, m.ratio[j], m.figure[j]/m.ref[j])
					}
				}
			}
		})
	}
}

func TestCorrelation(t *testing.T) {
	for _, tc := range []struct {
		name string
		a, b []float64
		want float64
	}{
		{"moving together", []float64{1, 2, 3, 4}, []float64{10, 20, 30, 40}, 1},
		{"moving apart", []float64{1, 2, 3}, []float64{3, 2, 1}, -1},
		{"no spread", []float64{1, 1, 1}, []float64{1, 2, 3}, math.NaN()},
		{"too few pairs", []float64{1, 2}, []float64{1, 2}, math.NaN()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := correlation(tc.a, tc.b)
			if math.IsNaN(tc.want) != math.IsNaN(got) || (!math.IsNaN(got) && math.Abs(got-tc.want) > 1e-9) {
				t.Errorf("correlation = %v, want %v", got, tc.want)
			}
		})
	}
}
