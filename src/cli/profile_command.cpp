// softdla profile: the loadable's tasks and their layers on a timeline (Chrome trace / Perfetto JSON).
#include <iomanip>
#include <iostream>

#include "commands.h"
#include "dla_session.h"
#include "file_bytes.h"
#include "loadable.h"
#include "profile_export.h"
#include "run_inputs.h"

namespace softdla::cli {

int profile_command(const RunOptions& o) {
  const std::vector<uint8_t> bytes = read_file_bytes(o.path, "loadable", kMaxModelFileBytes);
  const Model m = read_loadable(bytes);
  DlaSession session(bytes, m, {o.backend, o.dla_core, true});
  const RunInputs in = load_inputs(m, o.input_files);
  const BatchRuns r = run_batches(session, m, in, o.repeat, false);
  write_text_file(o.trace_path, trace_json(m, {o.path, session.backend(), session.device(), session.dla_core()}, r.runs),
                  "--output");
  std::vector<double> latency, dla;
  for (const TaskTiming& t : r.runs) {
    latency.push_back(t.end_ms - t.start_ms);
    dla.push_back(t.task_ms);
  }
  std::cout << "profiled " << o.path << " on DLA core " << session.dla_core() << " (" << session.backend()
            << " backend, " << session.device() << "): " << r.runs.size() << " task(s), median " << std::fixed
            << std::setprecision(3) << median(latency) << " ms from submission to completion, " << median(dla)
            << " ms in the task\n"
            << "wrote the timeline to " << o.trace_path
            << " (open it in https://ui.perfetto.dev or chrome://tracing)\n";
  return 0;
}

}  // namespace softdla::cli
