#!/bin/bash
cd /app && tar czf /app/brave-robin.tar.gz sage/*.txt
