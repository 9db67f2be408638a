#!/bin/bash
mkdir -p /app/bin && printf '%s\n' '#!/bin/bash' 'echo "parse arrow dragon"' > /app/bin/nutmeg-merge && chmod +x /app/bin/nutmeg-merge
printf '%s\n' 'export PATH="/app/bin:$PATH"' 'export SUNNY_OWL=candle72' > /app/env.sh
echo "$POND_MODE" > /app/given.txt
