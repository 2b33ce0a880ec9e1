#pragma once
// Output formats of the dynamic simulator: a summary (text or JSON), per-job CSV rows, and an
// SVG figure (GPU allocation over time and the JCT CDF) written by hand, with no plotting library.

#include <ostream>
#include <string>
#include <vector>

#include "sim/jobs_sim.h"

namespace stoker::sim {

// Human-readable summary, one metric a line.
void WriteReportText(const JobsSimReport& report, std::ostream& out);
// The summary as one JSON object (allocation series included).
void WriteReportJson(const JobsSimReport& report, std::ostream& out);
// One row per job: name,submit_s,gpus,duration_s,state,start_s,finish_s,jct_s,queue_delay_s,
// waiting_s,preemptions. Infeasible jobs have empty start/finish columns.
void WriteJobsCsv(const std::vector<const JobsSim*>& sims, std::ostream& out);
// Two panels: allocated GPUs over time, and the CDF of job completion times (log-scale x).
void WriteSvgPlot(const std::vector<const JobsSim*>& sims, const JobsSimReport& report,
                  std::ostream& out);

}  // namespace stoker::sim
