#!/bin/bash
mkdir -p /app/bin && printf '%s\n' '#!/bin/bash' 'echo "sort noble beacon rabbit"' > /app/bin/delta-test && chmod +x /app/bin/delta-test
printf '%s\n' 'export PATH="/app/bin:$PATH"' 'export HAPPY_DRUM=coral47' > /app/env.sh
echo "$CABIN_CHANNEL" > /app/given.txt
