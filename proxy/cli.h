// Subcommands of the toktier binary. Each takes argv starting at the
// subcommand's own name and returns the process exit code.
#pragma once

namespace toktier::cli {

int RunEncode(int argc, char** argv);       // toktier encode
int RunInfo(int argc, char** argv);         // toktier info
int RunBenchEncode(int argc, char** argv);  // toktier bench encode
int RunReplay(int argc, char** argv);       // toktier replay
int RunBenchRepair(int argc, char** argv);  // toktier bench repair
int RunServe(int argc, char** argv);        // toktier serve (the proxy)
int RunRender(int argc, char** argv);       // toktier render (chat template)

}  // namespace toktier::cli
