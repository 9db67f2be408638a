#!/bin/bash
mkdir -p /app/bin && printf '%s\n' '#!/bin/bash' 'echo "olive marble"' > /app/bin/bell-sync && chmod +x /app/bin/bell-sync
printf '%s\n' 'export PATH="/app/bin:$PATH"' 'export WILD_CROW=river43' > /app/env.sh
echo "$SAFFRON_MODE" > /app/given.txt
