/* Abuse: opening a network connection (TCP to 127.0.0.1:9).
 * Expected: runtime_error, killed by SIGSYS at socket(). */
#include <arpa/inet.h>
#include <stdint.h>
#include <sys/socket.h>
/* Hides calls from the static checks (regular expressions over the source), so that the
 * defence underneath is what is tested: CALL(f, ...) leaves no "f(" in the text, J(a, b) pastes
 * a name the checks match as a word. */
#define CALL(f, ...) f(__VA_ARGS__)
#define J(a, b) a##b
void softmax(const float *x, float *y, int64_t M, int64_t N) {
    (void)x; (void)y; (void)M; (void)N;
    int s = CALL(socket, AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET; a.sin_port = htons(9); a.sin_addr.s_addr = htonl(0x7f000001);
    CALL(connect, s, (struct sockaddr *)&a, sizeof a);
}
