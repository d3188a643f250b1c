package main

import (
	"math"
	"slices"
	"testing"
)

func TestSplitModesGroupsRunsByTheirFigure(t *testing.T) {
	for _, tc := range []struct {
		name        string
		figure, ref []float64
		wantNames   []string
		wantRuns    [][]int
	}{
		{"no runs", nil, nil, nil, nil},
		{"figures within a few per cent are one mode", []float64{2200, 2300, 2250}, []float64{180, 185, 182},
			[]string{"one mode"}, [][]int{{1, 2, 3}}},
		{"a jump of 1.5x splits fast from slow, in run order", []float64{3116, 2389, 2339, 2379, 2325, 3682}, []float64{187, 187, 188, 188, 188, 218},
			[]string{"fast", "slow"}, [][]int{{2, 3, 4, 5}, {1, 6}}},
		{"the widest jump decides when there are two", []float64{100, 125, 200}, []float64{1, 1, 1},
			[]string{"fast", "slow"}, [][]int{{1, 2}, {3}}},
		{"a run without its reference keeps its figure", []float64{100, 300}, []float64{1},
			[]string{"fast", "slow"}, [][]int{{1}, {2}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ms := splitModes(tc.figure, tc.ref, nil, nil)
			if len(ms) != len(tc.wantNames) {
				t.Fatalf("got %d modes %+v, want %v", len(ms), ms, tc.wantNames)
			}
			for i, m := range ms {
				if m.name != tc.wantNames[i] || !slices.Equal(m.runs, tc.wantRuns[i]) {
					t.Errorf("mode %d: %s runs %v, want %s %v", i, m.name, m.runs, tc.wantNames[i], tc.wantRuns[i])
				}
				for j, r := range m.runs {
					if m.figure[j] != tc.figure[r-1] {
						t.Errorf("mode %d run %d: figure %v, want %v", i, r, m.figure[j], tc.figure[r-1])
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
