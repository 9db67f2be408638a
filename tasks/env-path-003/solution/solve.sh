#!/bin/bash
mkdir -p /app/bin && printf '%s\n' '#!/bin/bash' 'echo "shell coral cinder"' > /app/bin/bell-fix && chmod +x /app/bin/bell-fix
printf '%s\n' 'export PATH="/app/bin:$PATH"' 'export GENTLE_HOLLOW=mint25' > /app/env.sh
echo "$BELL_MODE" > /app/given.txt
