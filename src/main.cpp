#include "cli/app.hpp"

int main(int argc, char** argv) {
    return redsem::cli::main(argc, argv);
}
