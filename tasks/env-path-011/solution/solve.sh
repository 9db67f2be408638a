#!/bin/bash
mkdir -p /app/bin && printf '%s\n' '#!/bin/bash' 'echo "drum marble"' > /app/bin/heron-open && chmod +x /app/bin/heron-open
printf '%s\n' 'export PATH="/app/bin:$PATH"' 'export STEADY_QUARTZ=salmon96' > /app/env.sh
echo "$CLIFF_MODE" > /app/given.txt
