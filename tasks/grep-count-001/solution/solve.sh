#!/bin/bash
grep -c 'bell' /app/logs/shell.log > /app/ember_count.txt
