#!/bin/bash
mkdir -p /app/bin && printf '%s\n' '#!/bin/bash' 'echo "nectar clever sandal"' > /app/bin/salmon-render && chmod +x /app/bin/salmon-render
printf '%s\n' 'export PATH="/app/bin:$PATH"' 'export COBALT_JASPER=bucket3' > /app/env.sh
echo "$CANYON_TARGET" > /app/given.txt
