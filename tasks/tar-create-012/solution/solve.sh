#!/bin/bash
cd /app && tar czf /app/bold-boulder.tar.gz birch/*.conf
