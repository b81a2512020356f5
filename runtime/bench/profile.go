package bench

import (
	"fmt"
	"io"
	"sort"
	"time"

	"tfc/runtime/device"
	"tfc/runtime/device/gpu"
	"tfc/runtime/lanes"
)

// ProfileMethod says how the kernel profile is taken.
const ProfileMethod = "After the decode measure, the same batch runs again with every kernel launch timed on the " +
	"device between two events (graph replay off while timing, so the wall times of this run are not the " +
	"measure's). The backend's profile is read after each round; profile holds the decode window's rounds, " +
	"prefill_profile the rounds before it (the prompts' chunks), and the vision profile one more run of the " +
	"tower after its measure: launches_per_round = launches / rounds, us_per_launch = device time / launches, " +
	"share = the kernel's device time over all kernels' device time in the window."

// KernelProfile is the device time of the kernels of a window of rounds.
type KernelProfile struct {
	Rounds           int           `json:"rounds"`
	KernelMsPerRound float64       `json:"kernel_ms_per_round"` // all kernels' device time a round
	MsPerRound       float64       `json:"ms_per_round"`        // wall time a round of the timed run
	Kernels          []KernelShare `json:"kernels"`             // by device time, largest first
	Method           string        `json:"method"`
}

// KernelShare is one kernel's part of a window.
type KernelShare struct {
	Name             string  `json:"name"`
	LaunchesPerRound float64 `json:"launches_per_round"`
	UsPerLaunch      float64 `json:"us_per_launch"`
	Share            float64 `json:"share"`
}

// launchCounter is a backend that counts graph-replayed and plain launches.
type launchCounter interface{ Launches() gpu.LaunchCounts }

// waiter is a backend that counts the time the host spent blocked on the device.
type waiter interface{ Waited() time.Duration }

// profileDecode runs batch b again with kernel timing on and profiles its decode window and the
// prefill rounds before it.
func profileDecode(s *lanes.Scheduler, tm *timedModel, prof device.Profiler, vocab int32, b int, o Options) (decode, prefill *KernelProfile, err error) {
	prof.Profile(true)
	tm.profileWith(prof)
	run, err := runBatch(s, tm, vocab, b, o.PromptTokens, o.NewTokens, o.Seed)
	tm.profileWith(nil)
	prof.Profile(false)
	if err != nil {
		return nil, nil, err
	}
	lo, hi, err := decodeWindow(run.rounds, b)
	if err != nil {
		return nil, nil, err
	}
	decode = kernelProfile(run.rounds[lo-1].profile, run.rounds[hi].profile, hi-lo+1)
	decode.MsPerRound = ms(run.rounds[hi].end.Sub(run.rounds[lo-1].end)) / float64(hi-lo+1)
	prefill = kernelProfile(nil, run.rounds[lo-1].profile, lo)
	prefill.MsPerRound = ms(run.rounds[lo-1].end.Sub(run.rounds[0].start)) / float64(lo)
	return decode, prefill, nil
}

// profileVision runs the tower once more with kernel timing on and profiles it as one round.
func profileVision(prof device.Profiler, run func() error) (*KernelProfile, error) {
	prof.Profile(true)
	t := time.Now()
	err := run()
	wall := time.Since(t)
	after := prof.Profiled()
	prof.Profile(false)
	if err != nil {
		return nil, err
	}
	p := kernelProfile(nil, after, 1)
	p.MsPerRound = ms(wall)
	return p, nil
}

// kernelProfile is what the profile gained from before to after, over rounds rounds.
func kernelProfile(before, after []device.KernelTime, rounds int) *KernelProfile {
	base := map[string]device.KernelTime{}
	for _, k := range before {
		base[k.Name] = k
	}
	p := &KernelProfile{Rounds: rounds, Kernels: []KernelShare{}, Method: ProfileMethod}
	var total time.Duration
	type gain struct {
		name     string
		launches int
		t        time.Duration
	}
	var gains []gain
	for _, k := range after {
		g := gain{k.Name, k.Launches - base[k.Name].Launches, k.Total - base[k.Name].Total}
		if g.launches > 0 {
			gains = append(gains, g)
			total += g.t
		}
	}
	sort.SliceStable(gains, func(i, j int) bool { return gains[i].t > gains[j].t })
	for _, g := range gains {
		ks := KernelShare{Name: g.name, LaunchesPerRound: float64(g.launches) / float64(rounds),
			UsPerLaunch: float64(g.t.Nanoseconds()) / 1e3 / float64(g.launches)}
		if total > 0 {
			ks.Share = float64(g.t) / float64(total)
		}
		p.Kernels = append(p.Kernels, ks)
	}
	p.KernelMsPerRound = ms(total) / float64(rounds)
	return p
}

// WriteTable prints the profile of what (e.g. "decode batch 8") as a table.
func (p *KernelProfile) WriteTable(w io.Writer, what string) {
	fmt.Fprintf(w, "bench: %s: kernels over %d rounds, %.3f ms of device time a round (%.3f ms wall a round while timed)\n",
		what, p.Rounds, p.KernelMsPerRound, p.MsPerRound)
	width := len("kernel")
	for _, k := range p.Kernels {
		width = max(width, len(k.Name))
	}
	fmt.Fprintf(w, "  %-*s  %14s  %10s  %6s\n", width, "kernel", "launches/round", "us/launch", "share")
	for _, k := range p.Kernels {
		fmt.Fprintf(w, "  %-*s  %14.2f  %10.2f  %5.1f%%\n", width, k.Name, k.LaunchesPerRound, k.UsPerLaunch, 100*k.Share)
	}
}
