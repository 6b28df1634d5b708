/* test_proc.c - lib/common/proc: state, parent and first child of real
 * processes read from /proc. */
#include "config.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/proc.h"
#include "tap.h"

int main (void)
{
    pid_t child;
    int status;

    plan (NO_PLAN);
    ok (proc_state (getpid ()) == 'R', "this process is running (R)");
    ok (proc_ppid (getpid ()) == getppid (), "its parent is getppid()");
    ok (proc_first_child (getpid ()) == 0, "no child yet");

    if ((child = fork ()) < 0)
        BAIL_OUT ("fork");
    if (child == 0) {
        raise (SIGSTOP);
        _exit (0);
    }
    if (waitpid (child, &status, WUNTRACED) != child || !WIFSTOPPED (status))
        BAIL_OUT ("the child did not stop");
    ok (proc_first_child (getpid ()) == child, "the child is the first child");
    ok (proc_state (child) == 'T', "a stopped child is T");
    ok (proc_ppid (child) == getpid (), "its parent is this process");
    kill (child, SIGKILL);
    waitpid (child, &status, 0);
    ok (proc_state (child) == 0 && proc_ppid (child) == 0 && proc_first_child (child) == 0,
        "a process that is gone: 0 for each");
    done_testing ();
    return exit_status ();
}
