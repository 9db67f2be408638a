#!/bin/bash
mkdir -p /app/bin && printf '%s\n' '#!/bin/bash' 'echo "rustic happy meteor"' > /app/bin/glacier-trim && chmod +x /app/bin/glacier-trim
printf '%s\n' 'export PATH="/app/bin:$PATH"' 'export GENTLE_RAVEN=lotus19' > /app/env.sh
echo "$WILLOW_MODE" > /app/given.txt
