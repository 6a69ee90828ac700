// A graceful stop on SIGTERM or SIGUSR1: what a batch system sends before it
// kills a job at its time limit (Slurm: SIGTERM, then SIGKILL after
// KillWait; `#SBATCH --signal=USR1@120` asks for SIGUSR1 that many seconds
// earlier). The signals are blocked in every thread and taken by one thread
// that waits for them and only records them (stop_signal.cpp says why not a
// handler). The trainer looks at the record after every step (all ranks
// agree through the step's loss all-reduce), writes a checkpoint where it
// stands, and stops with an error that says --resume continues. SIGINT
// keeps its default (Ctrl-C ends at once).
#pragma once

namespace mrmf {

// Blocks the signals and starts the thread that takes them (idempotent;
// from main(), before any other thread starts).
void install_stop_signal_handlers();
// The signal received since the start (SIGTERM, SIGUSR1), or 0.
int stop_signal_received();
// Sends `sig` to this process (as a batch system does) and waits until it is
// recorded, at most timeout_s: false if it was not. For test hooks.
bool send_stop_signal_to_self(int sig, double timeout_s = 10.0);
// "SIGTERM", "SIGUSR1", or "signal N".
const char* stop_signal_name(int sig);
// Set by the trainer when it stops on such a signal, its checkpoint written
// (every rank of its communicator stops at the same step): main() then waits
// for the job's other ranks and ends in order instead of aborting the job
// (an abort could kill another rank still writing its checkpoint).
void note_stopped_by_signal() noexcept;
bool stopped_by_signal() noexcept;

}  // namespace mrmf
