#include "client/cli/commands.h"

int main(int argc, char** argv) { return kcache::cli::RunCli(argc, argv); }
