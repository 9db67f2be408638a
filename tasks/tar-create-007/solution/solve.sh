#!/bin/bash
cd /app && tar czf /app/lucky-cotton.tar.gz harbor/*.txt
